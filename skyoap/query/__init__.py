"""The query layer: answers SkyWalking's query protocol (GraphQL) from what
storage holds."""

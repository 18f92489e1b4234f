"""The query layer: it answers SkyWalking's query protocol (GraphQL, as
SkyWalking 10.x serves it to its UI, its CLI and the Grafana plugin) from what
storage holds: the schema (``sdl/``), the endpoint and its execution, and a
module per area of the protocol. The metrics language ``execExpression``
evaluates, and the vocabulary it shares with the protocol (``Duration``,
``Entity``, the catalogue of metric names), are ``skyoap/mqe/``'s."""

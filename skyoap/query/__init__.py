"""The query layer: it answers SkyWalking's query protocol (GraphQL, as
SkyWalking 10.x serves it to its UI, its CLI and the Grafana plugin) from what
storage holds: the schema (``sdl/``), the endpoint and its execution, the
protocol's inputs (``Duration``, ``Entity``), the catalogue of the metric names
SkyWalking's dashboards ask for, and MQE, the metrics query language
``execExpression`` evaluates."""

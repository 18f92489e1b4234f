"""The names of the components agents name by id (SkyWalking's
``component-libraries.yml``): those of SkyWalking's Python agent, and the
common ones every agent shares. A span's component is answered by name, or
by its id as a string when it is not one of these."""

from __future__ import annotations

COMPONENTS: dict[int, str] = {
    0: "Unknown",
    1: "Tomcat",
    2: "HttpClient",
    3: "Dubbo",
    5: "Mysql",
    7: "Redis",
    9: "MongoDB",
    14: "SpringMVC",
    22: "PostgreSQL",
    23: "GRPC",
    27: "Kafka",
    40: "kafka-producer",
    41: "kafka-consumer",
    47: "Elasticsearch",
    49: "http",
    50: "rpc",
    51: "RabbitMQ",
    52: "rabbitmq-producer",
    53: "rabbitmq-consumer",
    94: "HBase",
    111: "AzureHttpTrigger",
    112: "Neo4j",
    124: "AWSLambdaTrigger",
    125: "AWSLambdaGatewayAPIHTTP",
    126: "AWSLambdaGatewayAPIREST",
    138: "AWSDynamoDB",
    139: "AWSSNS",
    140: "AWSSQS",
    5013: "OpenFunction",
    7000: "Python",
    7001: "Flask",
    7002: "Requests",
    7003: "PyMysql",
    7004: "Django",
    7005: "Tornado",
    7006: "Urllib3",
    7007: "Sanic",
    7008: "AioHttp",
    7009: "Pyramid",
    7010: "Psychopg",  # sic: the name SkyWalking answers
    7011: "Celery",
    7012: "Falcon",
    7013: "MysqlClient",
    7014: "FastAPI",
    7015: "Bottle",
    7016: "AsyncPG",
    7017: "AIORedis",
    7018: "Websockets",
    7019: "HTTPX",
}


def component_name(component_id: int) -> str:
    return COMPONENTS.get(component_id, str(component_id))

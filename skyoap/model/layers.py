"""The layers SkyWalking names (its ``Layer``): what kind of thing a service
is, from the technology it was observed through."""

from __future__ import annotations

LAYERS = frozenset((
    "UNDEFINED", "MESH", "GENERAL", "OS_LINUX", "K8S", "FAAS", "MESH_CP", "MESH_DP", "DATABASE", "CACHE",
    "BROWSER", "SO11Y_OAP", "SO11Y_SATELLITE", "MQ", "VIRTUAL_DATABASE", "VIRTUAL_MQ", "VIRTUAL_GATEWAY",
    "K8S_SERVICE", "MYSQL", "VIRTUAL_CACHE", "POSTGRESQL", "APISIX", "AWS_EKS", "OS_WINDOWS", "AWS_S3",
    "AWS_DYNAMODB", "AWS_GATEWAY", "REDIS", "ELASTICSEARCH", "RABBITMQ", "MONGODB", "KAFKA", "PULSAR",
    "BOOKKEEPER", "NGINX", "ROCKETMQ", "CLICKHOUSE", "ACTIVEMQ", "CILIUM_SERVICE", "SO11Y_JAVA_AGENT", "KONG",
    "SO11Y_GO_AGENT", "FLINK", "BANYANDB", "GENAI", "VIRTUAL_GENAI", "ENVOY_AI_GATEWAY", "IOS",
    "WECHAT_MINI_PROGRAM", "ALIPAY_MINI_PROGRAM", "AIRFLOW",
))  # fmt: skip
"""Every layer SkyWalking 10 declares."""

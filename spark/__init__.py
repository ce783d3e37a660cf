"""PySpark analysis of captured RocketMQ traffic."""

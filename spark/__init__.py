"""PySpark analysis of captured RocketMQ traffic (planned: issue 9; nothing here yet)."""

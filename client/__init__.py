"""RocketMQ producer and consumers on trocket.remoting (planned: issue 7; nothing here yet)."""

"""RocketMQ producer and consumers built on trocket.remoting."""

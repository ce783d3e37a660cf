"""A small RocketMQ broker and name server built on trocket.remoting."""

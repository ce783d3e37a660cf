"""RPC framework on trio mirroring RocketMQ's Netty remoting (see DESIGN.md)."""

"""RocketMQ's JSON bodies (route data, heartbeats, topic configs, ...), written as its
fastjson writes them and read leniently, as real clients send them."""

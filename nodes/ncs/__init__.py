"""Network coordinate systems (pure, no sockets): Vivaldi and Meridian.

Both take measured round-trip times in milliseconds; who measures them (the UDP
probes in `nodes.probe`, or a simulator's latency model) is the caller's business.
"""

"""Network coordinate systems (pure, no sockets): Vivaldi and Meridian, on measured
round-trip times in ms from whoever measures them (`fogsdn.nodes.probe`, or a latency model).
"""

"""The engine under both faces (typed jobs and topics). Not public API.

- ``engine``: ``Engine``, what ``Worker`` and ``Subscriber`` share (runner + loop + surface).
- ``loop``: ``ConsumeLoop``, the one place for consumers, concurrency, pause/resume/shutdown.
- ``runner``: ``Runner``, one delivery from start to settle.
- ``middleware``: the chain around every delivery; ``stats``: outcome counters.
- ``faces``: what differs per face (find/call the handler, decide, log wording).
- ``settle``: delivery I/O; ``handlers``/``invoke``: registering and calling a handler.
"""

"""The servers: the REST API (:mod:`~slm.server.rest`, its request and response bodies in
:mod:`~slm.server.bodies`, the checks before routing in :mod:`~slm.server.guard`), the web
page it serves (:mod:`slm.server.web`) and the MCP server (:mod:`~slm.server.mcp`). Each
translates to :class:`slm.Memory` and decides nothing itself; importing ``slm`` loads none
of them (their dependencies are the ``server`` extras)."""

"""Ready-made tool sources env authors plug into ``list_tools``/``run_tool``.

Each source lives in its own module with its own optional dependency, so
importing this package costs nothing: ``from benchmax.tools.mcp import McpTools``
(``pip install 'benchmax[mcp]'``) exposes the tools of any MCP server.
"""

"""`python app.py --mcp` serves the public endpoints as MCP tools, each parameter described; off by default."""

import httpx
import pytest

from tests.conftest import APP_MAX_STEPS, AppServer


@pytest.fixture(scope="module")
def mcp_server(app_model, tmp_path_factory):
    server = AppServer(app_model, tmp_path_factory.mktemp("mcp"), {"SEEDLAB_MCP": "1"})
    server.start()
    yield server
    server.stop()


def test_the_mcp_schema_lists_the_public_endpoints_with_every_parameter_described(mcp_server):
    tools = {tool["name"]: tool for tool in httpx.get(f"{mcp_server.url}/gradio_api/mcp/schema", timeout=60).json()}
    assert set(tools) == {"grid", "vary", "matrix", "plot", "travel", "reproduce", "reverify", "preview",
                          "finish"}  # as --mcp's help says
    assert not {name for name in tools if name.startswith("page_")}  # the page's own events stay private
    grid = tools["grid"]["inputSchema"]["properties"]
    for name in ("prompt", "seeds", "num_inference_steps", "guidance_scale", "scheduler", "variation_seed",
                 "variation_strength", "seed_resize_from", "rng"):
        assert len(grid[name].get("description", "")) > 10, (name, grid[name])
    assert "0 to 18446744073709551615" in grid["seeds"]["description"]
    # This server's ranges (SEEDLAB_MAX_STEPS, the default max size), not only the recipe's 1-200 and 64-4096.
    assert f"from 1 to {APP_MAX_STEPS}" in grid["num_inference_steps"]["description"]
    assert "to 1024" in grid["width"]["description"] and "to 4096" not in grid["width"]["description"]
    assert {"prompt", "seed", "variations"} <= set(tools["vary"]["inputSchema"]["properties"])
    assert {"prompt", "seeds", "variations"} <= set(tools["matrix"]["inputSchema"]["properties"])
    assert "link" in tools["reproduce"]["inputSchema"]["properties"]["link_or_recipe"]["description"]


def test_mcp_is_off_by_default(app_server):
    assert httpx.get(f"{app_server.url}/gradio_api/mcp/schema", timeout=60).status_code == 404

"""`python app.py --mcp` serves the public endpoints as MCP tools, each parameter described; off by default."""

import httpx
import pytest

from tests.conftest import AppServer


@pytest.fixture(scope="module")
def mcp_server(app_model, tmp_path_factory):
    server = AppServer(app_model, tmp_path_factory.mktemp("mcp"), {"SEEDLAB_MCP": "1"})
    server.start()
    yield server
    server.stop()


def test_the_mcp_schema_lists_the_public_endpoints_with_every_parameter_described(mcp_server):
    tools = {tool["name"]: tool for tool in httpx.get(f"{mcp_server.url}/gradio_api/mcp/schema", timeout=60).json()}
    assert {"grid", "vary", "matrix", "reproduce"} <= set(tools)
    assert not {name for name in tools if name.startswith("page_")}  # the page's own events stay private
    grid = tools["grid"]["inputSchema"]["properties"]
    for name in ("prompt", "seeds", "num_inference_steps", "guidance_scale", "scheduler", "variation_seed",
                 "variation_strength", "seed_resize_from", "rng"):
        assert len(grid[name].get("description", "")) > 10, (name, grid[name])
    assert "0 to 18446744073709551615" in grid["seeds"]["description"]
    assert "from 1 to 200" in grid["num_inference_steps"]["description"]
    assert {"prompt", "seed", "variations"} <= set(tools["vary"]["inputSchema"]["properties"])
    assert {"prompt", "seeds", "variations"} <= set(tools["matrix"]["inputSchema"]["properties"])
    assert "link" in tools["reproduce"]["inputSchema"]["properties"]["link_or_recipe"]["description"]


def test_mcp_is_off_by_default(app_server):
    assert httpx.get(f"{app_server.url}/gradio_api/mcp/schema", timeout=60).status_code == 404

"""A request for an agent nobody hosts gets a 404 in the error format of its binding."""

import httpx


def test_unknown_agent_answers_in_each_bindings_error_format(server):
    rest = httpx.get(server.url + "/a2a/nobody/tasks", headers={"A2A-Version": "1.0"})
    assert rest.status_code == 404
    assert rest.json()["error"]["details"][0]["reason"] == "METHOD_NOT_FOUND"
    rpc = httpx.post(server.url + "/a2a/nobody", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                                                       "params": {"id": "x"}})
    assert rpc.status_code == 404 and rpc.json()["error"]["code"] == -32601

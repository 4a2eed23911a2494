import assert from "node:assert/strict";
import { test } from "node:test";
import { RouteTable } from "../../src/http/edge.ts";

test("the route table answers which methods a concrete path takes", () => {
  const routes = new RouteTable();
  routes.add("/v1/jobs", "GET");
  routes.add("/v1/jobs", "HEAD");
  routes.add("/v1/jobs/:id", ["GET", "HEAD"]);
  routes.add("/v1/models/*", "get");
  routes.add("/v1/webhooks/:id", "DELETE");
  routes.add("/app/api/webhooks/:id/replay", "POST");

  assert.deepEqual(routes.allowed("/v1/jobs"), ["GET", "HEAD"]);
  assert.deepEqual(routes.allowed("/v1/jobs/"), ["GET", "HEAD"], "a trailing slash is ignored, as the router does");
  assert.deepEqual(routes.allowed("/v1/jobs/job_1"), ["GET", "HEAD"]);
  assert.deepEqual(routes.allowed("/v1/models/Qwen/Qwen3-8B"), ["GET"], "a wildcard spans slashes");
  assert.deepEqual(routes.allowed("/app/api/webhooks/wh_1/replay"), ["POST"]);
  assert.equal(routes.allowed("/v1/jobs/job_1/extra"), undefined, "a parameter is one segment");
  assert.equal(routes.allowed("/v1/webhooks"), undefined);
  assert.equal(routes.allowed("/v1/jobsx"), undefined);
  assert.equal(routes.allowed("/V1/JOBS"), undefined, "paths are case-sensitive, as the router's are");
});

/**
 * The OpenAPI 3.1 document of /v1, generated from the routes as registered and the schemas they
 * declare, so that it cannot drift from what the gateway validates. OpenAPI 3.1 takes JSON Schema
 * as is; only references to shared schemas (`Job#`) become component references. Pure.
 */
import type { RouteOptions } from "fastify";

type Schema = Record<string, unknown>;

/** A route as the onRoute hook saw it. */
export interface RegisteredRoute {
  method: string | string[];
  url: string;
  schema?: RouteOptions["schema"];
  config?: unknown;
}

export const API_PREFIX = "/v1";
const DOCUMENTED_METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);

/** `{ $ref: "Job#" }` → `{ $ref: "#/components/schemas/Job" }`, everywhere in a schema. */
function componentRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(componentRefs);
  if (typeof value !== "object" || value === null) return value;
  const out: Schema = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === "$id") continue;
    out[key] = key === "$ref" && typeof inner === "string" ? `#/components/schemas/${inner.replace(/#$/, "")}` : componentRefs(inner);
  }
  return out;
}

/** `/v1/jobs/:id` → `/jobs/{id}`; the model route's wildcard is the model id. */
export function openApiPath(url: string): string {
  return url
    .slice(API_PREFIX.length)
    .replace(/:([A-Za-z0-9_]+)/g, "{$1}")
    .replace(/\*$/, "{model_id}");
}

function parameters(schema: Schema | undefined, where: "path" | "query"): Schema[] {
  const properties = (schema?.properties ?? {}) as Record<string, Schema>;
  const required = new Set((schema?.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name: name === "*" ? "model_id" : name,
    in: where,
    required: where === "path" || required.has(name),
    schema: componentRefs(property),
    ...(typeof property.description === "string" ? { description: property.description } : {}),
  }));
}

/**
 * Headers a route reads itself rather than through a schema Fastify validates on every request
 * (route `config.documentedHeaders`): documented, at no cost on the request path.
 */
export interface DocumentedHeader {
  name: string;
  description: string;
  schema: Schema;
}

function headerParameters(config: unknown): Schema[] {
  const headers = (config as { documentedHeaders?: DocumentedHeader[] } | undefined)?.documentedHeaders ?? [];
  return headers.map((header) => ({ name: header.name, in: "header", required: false, schema: header.schema, description: header.description }));
}

function responses(declared: Schema | undefined): Schema {
  const out: Schema = {};
  for (const [status, schema] of Object.entries(declared ?? {})) {
    const code = status.toUpperCase();
    out[code] = {
      description: code.startsWith("2") ? "Success" : "The spec's error body (docs/errors.md)",
      content: { "application/json": { schema: componentRefs(schema) } },
    };
  }
  return Object.keys(out).length > 0 ? out : { "200": { description: "Success" } };
}

function operation(route: RegisteredRoute, method: string): Schema {
  const schema = (route.schema ?? {}) as Schema;
  const isPublic = Boolean((route.config as { public?: boolean } | undefined)?.public);
  return {
    operationId: `${method.toLowerCase()}${openApiPath(route.url).replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase())}`,
    parameters: [...parameters(schema.params as Schema | undefined, "path"), ...parameters(schema.querystring as Schema | undefined, "query"), ...headerParameters(route.config)],
    ...(schema.body ? { requestBody: { required: true, content: { "application/json": { schema: componentRefs(schema.body) } } } } : {}),
    responses: responses(schema.response as Schema | undefined),
    ...(isPublic ? { security: [] } : {}),
  };
}

export function openApiDocument(routes: RegisteredRoute[], sharedSchemas: Schema[], version: string): Schema {
  const paths: Record<string, Schema> = {};
  for (const route of routes) {
    if (!route.url.startsWith(`${API_PREFIX}/`)) continue;
    for (const method of [route.method].flat().filter((m) => DOCUMENTED_METHODS.has(m.toUpperCase()))) {
      (paths[openApiPath(route.url)] ??= {})[method.toLowerCase()] = operation(route, method);
    }
  }
  const schemas: Record<string, unknown> = {};
  for (const schema of sharedSchemas) schemas[String(schema.$id)] = componentRefs(schema);
  return {
    openapi: "3.1.0",
    info: {
      title: "Prepaid-credit chat inference API",
      version,
      description: "The OpenAI chat-completions protocol, paid in prepaid credits held in on-chain escrow. See docs/api.md.",
    },
    servers: [{ url: API_PREFIX }],
    security: [{ apiKey: [] }],
    paths,
    components: {
      schemas,
      securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "svc_live_ followed by 32 letters and digits" } },
    },
  };
}

/**
 * A schema validation failure (Fastify's ajv, run with `verbose` so that each error carries its
 * schema and value) as the spec's `invalid_request`: `param` names the field in the form clients
 * write it (`messages[0].role`), the message says in words what the field must be. Pure.
 */
import { ApiError } from "../core/index.ts";

/** The parts of an ajv error this reads. */
export interface SchemaError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: Record<string, unknown>;
  data?: unknown;
}

type Schema = Record<string, unknown>;

const ARTICLE: Record<string, string> = {
  string: "a string",
  number: "a number",
  integer: "an integer",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
};
const PLURAL: Record<string, string> = { string: "strings", number: "numbers", integer: "integers", boolean: "booleans", object: "objects" };

/** What a schema accepts, in words: "a string or an array of strings". `null` (= not given) is left out. */
export function describe(schema: Schema | undefined): string {
  if (!schema) return "valid";
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Schema[]).filter((s) => s.type !== "null").map(describe).join(" or ");
  const types = [schema.type ?? []].flat().filter((t) => t !== "null") as string[];
  return (
    types
      .map((type) => {
        const items = schema.items as Schema | undefined;
        if (type === "array" && items && typeof items.type === "string" && PLURAL[items.type]) return `an array of ${PLURAL[items.type]}`;
        return ARTICLE[type] ?? type;
      })
      .join(" or ") || "valid"
  );
}

/** `/messages/0/role` → `messages[0].role`; the root is named after the part of the request. */
function fieldName(pointer: string, root: string): string {
  const segments = pointer
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  let name = "";
  for (const segment of segments) name += /^\d+$/.test(segment) ? `[${segment}]` : name === "" ? segment : `.${segment}`;
  return name === "" ? root : name;
}

/** An item of an array of plain values is reported on the array (`events`, not `events[1]`). */
function paramOf(field: string): string {
  return field.replace(/\[\d+\]$/, "");
}

function quoteAll(values: unknown[]): string {
  return values.map((v) => (typeof v === "string" ? `'${v}'` : JSON.stringify(v))).join(", ");
}

function got(value: unknown): string {
  return JSON.stringify(value)?.slice(0, 100) ?? String(value);
}

function messageFor(error: SchemaError, field: string, root: string): string {
  const schema = error.parentSchema ?? {};
  const name = `'${field}'`;
  const described = typeof schema.description === "string" ? `: ${schema.description}` : "";
  switch (error.keyword) {
    case "type":
      if (field === root && root === "body") return "The request body must be a JSON object.";
      if (root === "query" && Array.isArray(error.data)) return `${name} may be given once.`;
      return `${name} must be ${describe(schema)}.`;
    case "anyOf":
      return `${name} must be ${describe(schema)}.`;
    case "minimum":
    case "maximum": {
      const isInteger = [schema.type].flat().includes("integer");
      const span = `${String(schema.minimum ?? "-∞")} ${isInteger ? "to" : "and"} ${String(schema.maximum ?? "∞")}`;
      return `${name} must be ${isInteger ? `an integer from ${span}` : `between ${span}`}; got ${got(error.data)}.`;
    }
    case "minLength":
      return error.params.limit === 1 ? `${name} must be a non-empty string.` : `${name} must be at least ${String(error.params.limit)} characters long${described}.`;
    case "maxLength":
      return `${name} must be at most ${String(error.params.limit)} characters long.`;
    case "minItems":
      return `${name} must contain at least ${error.params.limit === 1 ? "one item" : `${String(error.params.limit)} items`}${described}.`;
    case "maxItems":
      return `${name} holds at most ${String(error.params.limit)} items.`;
    case "enum":
    case "const": {
      const allowed = error.keyword === "enum" ? (schema.enum as unknown[]) : [schema.const];
      return `${name} must be one of ${quoteAll(allowed)}; got ${got(error.data)}.`;
    }
    default:
      return `${name} is not valid${described || ` (${error.message ?? error.keyword})`}.`;
  }
}

/**
 * The one error to report. Of an `anyOf`, a branch whose type the value has explains the failure
 * best ("'stop' holds at most 4 items"); when no branch's type fits, the `anyOf` itself does.
 */
function pick(errors: SchemaError[]): SchemaError {
  const first = errors[0]!;
  const union = errors.find((e) => e.keyword === "anyOf" && (first.instancePath === e.instancePath || first.instancePath.startsWith(`${e.instancePath}/`)));
  if (!union) return first;
  const inside = errors.filter((e) => e !== union && (e.instancePath === union.instancePath || e.instancePath.startsWith(`${union.instancePath}/`)));
  return inside.find((e) => !(e.keyword === "type" && e.instancePath === union.instancePath)) ?? union;
}

const ROOTS: Record<string, string> = { body: "body", querystring: "query", params: "path", headers: "headers" };

export function schemaError(errors: SchemaError[], context: string | undefined): ApiError {
  const root = ROOTS[context ?? "body"] ?? "body";
  if (errors.length === 0) return new ApiError("invalid_request", "The request is not valid.", root);
  const error = pick(errors);
  if (error.keyword === "required") {
    const missing = String(error.params.missingProperty);
    const parentPath = fieldName(error.instancePath, "");
    const field = parentPath === "" ? missing : `${parentPath}.${missing}`;
    const property = ((error.parentSchema?.properties ?? {}) as Record<string, Schema>)[missing];
    const hint = typeof property?.description === "string" ? `: ${property.description}` : "";
    return new ApiError("invalid_request", `'${field}' is required${hint}.`, field);
  }
  if (error.keyword === "additionalProperties") {
    const field = `${fieldName(error.instancePath, "")}${error.instancePath ? "." : ""}${String(error.params.additionalProperty)}`;
    return new ApiError("invalid_request", `'${field}' is not a field of this request.`, field);
  }
  const field = fieldName(error.instancePath, root);
  return new ApiError("invalid_request", messageFor(error, field, root), paramOf(field));
}

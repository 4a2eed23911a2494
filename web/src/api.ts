/** The app's calls to its server routes under /app/api; the session rides on a cookie. */

export class ApiFailure extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`/app/api${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiFailure(json?.error?.message ?? `The server answered ${response.status}.`, response.status);
  return json as T;
}

export function usdc(credits: number): string {
  return (credits / 100).toFixed(2);
}

export function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "never";
}

/** Reading a test gateway's API with its first account's key, for checks between a test's steps. */
import type { TestGateway } from "./service.ts";

export async function apiGet<T>(gateway: TestGateway, path: string): Promise<{ status: number; body: T }> {
  // A deadline, so a request the gateway never answers fails the test that made it instead of hanging it.
  const response = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${gateway.apiKey}` }, signal: AbortSignal.timeout(30_000) });
  return { status: response.status, body: (await response.json()) as T };
}

export async function creditsRemaining(gateway: TestGateway): Promise<number> {
  return (await apiGet<{ credits_remaining: number }>(gateway, "/account")).body.credits_remaining;
}

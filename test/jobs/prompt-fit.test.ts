/**
 * When a prompt is admitted without its worker's count: only where the count could not change the
 * escrow's plan or the fit. Checked against core/pricing.ts's plan with the counts a real prompt
 * could have, from none up to the most the bound allows.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_COMPLETION_CAP, TIERS, planEscrow } from "../../src/core/index.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import { promptTokensAtMost } from "../../src/inference/token-bounds.ts";
import { contextWanted, fitUncounted } from "../../src/jobs/prompt-fit.ts";

const chat: ChatMessage[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "What is the capital of France? ".repeat(20) },
];

/** The escrow plan for a prompt of `promptTokens` in `fit`'s window, a well-funded wallet. */
function planFor(contextWindow: number, maxTokens: number | undefined, promptTokens: number) {
  return planEscrow({ rates: TIERS.pro, availableCredits: 1_000_000, maxTokens, promptTokens, contextWindow });
}

test("a chat prompt in a large window needs no count, with or without max_tokens, and the count would not change its plan", () => {
  for (const maxTokens of [256, undefined]) {
    const fit = fitUncounted(32_768, { messages: chat, maxTokens });
    assert.ok(fit, `uncounted with max_tokens ${maxTokens}`);
    assert.equal(fit.promptTokens, 0);
    assert.equal(fit.wanted, promptTokensAtMost(chat) + (maxTokens ?? DEFAULT_COMPLETION_CAP));
    const uncounted = planFor(fit.contextWindow, maxTokens, fit.promptTokens);
    for (const counted of [1, 150, promptTokensAtMost(chat)]) assert.deepEqual(planFor(fit.contextWindow, maxTokens, counted), uncounted, `a count of ${counted}`);
  }
});

test("a prompt whose bound leaves no room for its completion is counted", () => {
  const window = 2_048;
  assert.equal(fitUncounted(window, { messages: [{ role: "user", content: "x".repeat(500) }], maxTokens: 8 }), undefined, "the bound exceeds the window");
  assert.equal(fitUncounted(window, { messages: [{ role: "user", content: "Hi" }], maxTokens: 1_900 }), undefined, "the completion takes nearly the whole window");
  assert.equal(fitUncounted(window, { messages: [{ role: "user", content: "Hi" }] }), undefined, "no max_tokens: the cap depends on the count in so small a window");
  assert.ok(fitUncounted(window, { messages: [{ role: "user", content: "Hi" }], maxTokens: 8 }));
  // Exactly at the edge: the bound plus max_tokens equals the window.
  const messages: ChatMessage[] = [{ role: "user", content: "Hi" }];
  assert.ok(fitUncounted(promptTokensAtMost(messages) + 8, { messages, maxTokens: 8 }));
  assert.equal(fitUncounted(promptTokensAtMost(messages) + 7, { messages, maxTokens: 8 }), undefined);
});

test("the context a job needs: its count when it has one, else the bound its admission relied on", () => {
  assert.equal(contextWanted({ promptTokens: 12, maxTokens: 100 }, chat), 112);
  assert.equal(contextWanted({ promptTokens: 0, maxTokens: 100 }, chat), promptTokensAtMost(chat) + 100);
});

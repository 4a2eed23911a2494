/**
 * Raised by an engine before it generates anything when the prompt plus the requested completion
 * would not fit its context window; the gateway maps it to `context_length_exceeded`.
 */
export class ContextLengthExceededError extends Error {
  constructor(
    readonly promptTokens: number,
    readonly maxTokens: number,
    readonly contextWindow: number,
  ) {
    super(
      `The prompt (${promptTokens} tokens) plus max_tokens (${maxTokens}) exceeds the model's ` +
        `context window of ${contextWindow} tokens.`,
    );
    this.name = "ContextLengthExceededError";
  }
}

/** POST /chat/completions: JSON or SSE, with the x-svc-* headers and the settlement trailer. */
import type { FastifyInstance, FastifyReply } from "fastify";
import { ApiError } from "../../core/index.ts";
import type { ChatRequest, JobCaller, JobEvent, StartedJob } from "../../jobs/index.ts";
import type { FinishReason, Usage } from "../../inference/index.ts";
import { parseChatRequest, type ChatCompletionBody } from "../chat-request.ts";
import { completionBody, deltaChunk, finishChunk, sseData, usageChunk, type ChunkContext } from "../completion-body.ts";
import { errorBody } from "../errors.ts";
import { IDEMPOTENCY_KEY_HEADER, type IdempotencyPort, takeKey } from "../idempotency.ts";
import { CompletionTape, replayCompletion, startUnderKey } from "../idempotent-completion.ts";
import type { CompletionLog } from "../request-log.ts";
import { inRequestSpan } from "../request-span.ts";
import { ERROR_RESPONSES, ref } from "../schemas.ts";

const SETTLEMENT_HEADER = "x-svc-settlement-tx";

function jobHeaders(job: StartedJob): Record<string, string> {
  return {
    "x-svc-job-id": job.id,
    "x-svc-escrow-tx": job.escrowTx,
    "x-svc-worker": job.workerAddress,
    "x-svc-credits-remaining": String(job.creditsAfterLock),
  };
}

/** An AbortSignal that fires when the client goes away before the response is complete. */
function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  // A caller who hung up while its request waited its turn is gone before the listener above.
  if (reply.request.raw.socket.destroyed) controller.abort();
  return controller.signal;
}

function noteUsage<T extends { usage: Usage }>(log: CompletionLog, finished: T): T {
  log.promptTokens = finished.usage.promptTokens;
  log.completionTokens = finished.usage.completionTokens;
  return finished;
}

export interface ChatCompletionsOptions {
  /** Starts the caller's job; its admission confirms `keyToConfirm` (the route's `keyConfirmedAtAdmission`). */
  startJob(caller: JobCaller, chat: ChatRequest, signal: AbortSignal): Promise<StartedJob>;
  /** Error bodies link into `<appUrl>/docs/errors`; the origin is only known once the server listens. */
  appUrl(): string;
  /** The stored `Idempotency-Key`s; without it the header is not read. */
  idempotency?: IdempotencyPort;
}

const schema = { body: ref("ChatCompletionRequest"), response: { 200: ref("ChatCompletion"), ...ERROR_RESPONSES } };
/**
 * The completion is written as JSON.stringify writes it, not by the schema's serializer: the
 * OpenAI SDKs read these bytes, and the schema is there to validate and to document.
 */
const plainJson = () => (data: unknown) => JSON.stringify(data);

/** Everything one completion's answer needs once its job has started. */
interface Answer {
  reply: FastifyReply;
  job: StartedJob;
  events: AsyncIterator<JobEvent>;
  log: CompletionLog;
  chat: ChatRequest;
  /** Fires when the caller hangs up before the reply is complete. */
  callerGone: AbortSignal;
}

/** `stream: false`: the whole text, once the job is charged and its settlement recorded, with the settlement header. */
async function jsonCompletion({ reply, job, events, log, callerGone }: Answer) {
  let content = "";
  let finish: { finishReason: FinishReason; usage: Usage } | undefined;
  for (let next = await events.next(); !next.done; next = await events.next()) {
    const event = next.value;
    if (event.type === "delta") content += event.text;
    else if (event.type === "finished") finish = noteUsage(log, event);
    else {
      // An escrow table's job is answered before its batch's settlement is signed (docs/api.md).
      if (event.settlementTx !== null) reply.header(SETTLEMENT_HEADER, event.settlementTx);
      reply.header("x-svc-credits-remaining", String(event.creditsRemaining));
      log.creditsRemaining = event.creditsRemaining;
    }
  }
  // A caller who left mid-generation was charged for the output produced until then (its job
  // settled above, with no "finished" to tell): nobody is there to answer, least of all with an
  // error saying nothing was charged.
  if (callerGone.aborted) {
    reply.hijack();
    return undefined;
  }
  // The worker may have changed if the first one failed before its first token; a lock signed
  // after admission (an escrow table's) is named once it landed, before the charge.
  reply.header("x-svc-worker", job.workerAddress);
  reply.header("x-svc-escrow-tx", job.escrowTx);
  if (!finish) throw new ApiError("internal_error", "The job ended without a result; nothing was charged.");
  return completionBody({ jobId: job.id, created: job.created, model: job.model, content, ...finish });
}

/** `stream: true`: server-sent chunks, `[DONE]`, then the settlement as a trailer. */
async function streamCompletion({ reply, job, events, log, chat }: Answer, appUrl: () => string): Promise<void> {
  const chunkContext: ChunkContext = { jobId: job.id, created: job.created, model: job.model, includeUsage: chat.includeUsage };
  // Wait for the first event before committing to a 200, so a job that fails before its first
  // token (a timeout, a worker error) is still answered with its own status code.
  const first = await events.next();
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...jobHeaders(job),
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    trailer: SETTLEMENT_HEADER,
  });
  const write = (text: string) => {
    if (!res.destroyed && !res.writableEnded) res.write(text);
  };
  let sentFirst = false;
  let sentDone = false;
  const handle = (event: JobEvent) => {
    if (event.type === "delta") {
      write(sseData(deltaChunk(chunkContext, event.text, !sentFirst)));
      if (!sentFirst && log.workerRun) log.firstSentAt = performance.now();
      sentFirst = true;
    } else if (event.type === "finished") {
      noteUsage(log, event);
      if (!sentFirst) write(sseData(deltaChunk(chunkContext, "", true)));
      sentFirst = true;
      write(sseData(finishChunk(chunkContext, event.finishReason)));
      if (chat.includeUsage) write(sseData(usageChunk(chunkContext, event.usage)));
      write(sseData("[DONE]"));
      sentDone = true;
    } else {
      log.creditsRemaining = event.creditsRemaining;
      if (!res.destroyed && event.settlementTx !== null) res.addTrailers({ [SETTLEMENT_HEADER]: event.settlementTx });
    }
  };
  try {
    if (!first.done) handle(first.value);
    for (let next = await events.next(); !next.done; next = await events.next()) handle(next.value);
  } catch (error) {
    // After the stream has begun, a failure is one SSE error event and no [DONE].
    // Once [DONE] is out, a failed settlement shows only as a missing trailer and in GET /jobs/{id}.
    const apiError = error instanceof ApiError ? error : new ApiError("internal_error", "The service failed while streaming.");
    if (!sentDone) write(sseData(errorBody(apiError, appUrl())));
  }
  if (!res.destroyed && !res.writableEnded) res.end();
}

/**
 * Starts a job and streams it as `stream: true` does here: the same headers, chunks, trailer and
 * errors (one that comes before the first token answers with its own status). The web app's
 * playground answers through it for a wallet's session.
 */
export async function streamJob(reply: FastifyReply, chat: ChatRequest, start: (signal: AbortSignal) => Promise<StartedJob>, appUrl: () => string): Promise<void> {
  const callerGone = clientGone(reply);
  const job = await start(callerGone);
  reply.headers(jobHeaders(job));
  const log: CompletionLog = { model: chat.model, stream: true, jobId: job.id };
  await streamCompletion({ reply, job, events: job.events[Symbol.asyncIterator](), log, chat, callerGone }, appUrl);
}

export async function chatCompletionRoutes(app: FastifyInstance, options: ChatCompletionsOptions): Promise<void> {
  app.post("/chat/completions", { schema, serializerCompiler: plainJson, config: { keyConfirmedAtAdmission: true, documentedHeaders: [IDEMPOTENCY_KEY_HEADER] } }, async (request, reply) => {
    const chat = parseChatRequest(request.body as ChatCompletionBody);
    const log: CompletionLog = (request.completion = { model: chat.model, stream: chat.stream });
    // Without the header, not even a resolved promise is awaited on the request path.
    const keyed = request.headers["idempotency-key"] === undefined ? undefined : await takeKey(request, options.idempotency, request.owner.wallet);
    if (keyed && "outcome" in keyed) return replayCompletion(reply, keyed.outcome, options.appUrl());
    const held = keyed?.held;
    const signal = clientGone(reply);
    const job = await inRequestSpan(request, () => (held ? startUnderKey(held, (jobSignal) => options.startJob(request.owner, chat, jobSignal)) : options.startJob(request.owner, chat, signal)));
    log.jobId = job.id;
    if (job.workerRun) log.workerRun = job.workerRun;
    reply.headers(jobHeaders(job));
    const jobEvents = job.events[Symbol.asyncIterator]();
    // A job that fails before the reply is committed answers with the balance after its refund.
    const events: AsyncIterator<JobEvent> = {
      next: () =>
        jobEvents.next().catch((error: unknown) => {
          if (!reply.sent) reply.header("x-svc-credits-remaining", String(job.creditsRemaining));
          throw error;
        }),
    };
    const tape = held && new CompletionTape(held, job, chat);
    const answer: Answer = { reply, job, events: tape ? tape.watch(events) : events, log, chat, callerGone: signal };
    const answering: Promise<unknown> = chat.stream ? streamCompletion(answer, options.appUrl) : jsonCompletion(answer);
    const handled = tape ? tape.answered(answering) : answering;
    log.handled = handled;
    return handled;
  });
}

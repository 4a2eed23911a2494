/**
 * The frames one side of the worker protocol sends in one turn of the event loop leave in two
 * writes at most: the first at once, the rest together at the turn's end. A paid job is several
 * messages each way (the job, its deltas, its proof), and under load many jobs' messages are sent
 * in the same turn; written one frame at a time, each would be a system call of its own on the
 * sender and a read of its own on the receiver.
 *
 * The first frame is not held while the connection carries a single job: a lone request's job or
 * first token would otherwise wait for whatever else its turn runs (on the gateway, a
 * transaction's statements), which would add most of a millisecond to a sequential stream's first
 * token if every frame waited. With several jobs under way (`busy`), the first frame waits with the
 * rest, and the turn costs one write.
 */
import type { Duplex } from "node:stream";

export function coalescedWrites(socket: Duplex, busy: () => boolean = () => false): () => void {
  let sentThisTurn = false;
  let held = false;
  const endOfTurn = () => {
    sentThisTurn = false;
    if (!held) return;
    held = false;
    socket.uncork();
  };
  return () => {
    if (held) return;
    if (!sentThisTurn) {
      sentThisTurn = true;
      setImmediate(endOfTurn);
      if (!busy()) return;
    }
    held = true;
    socket.cork();
  };
}

/**
 * Frames sent in one turn of the event loop: the first is written at once, the rest in one write
 * at the turn's end; while the connection carries several jobs, the first waits too. The stream below is a real Node.js Writable that records each write it is
 * asked to make, one chunk (`_write`) or several at once (`_writev`), as a socket's are.
 */
import assert from "node:assert/strict";
import { setImmediate as nextTurn } from "node:timers/promises";
import { Duplex } from "node:stream";
import { test } from "node:test";
import { coalescedWrites } from "../../src/network/write-coalescing.ts";

function recordingSocket(): { socket: Duplex; writes: string[][] } {
  const writes: string[][] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      writes.push([chunk.toString()]);
      done();
    },
    writev(chunks, done) {
      writes.push(chunks.map(({ chunk }) => (chunk as Buffer).toString()));
      done();
    },
  });
  return { socket, writes };
}

test("the first frame of a turn is written at once, the rest together when the turn ends", async () => {
  const { socket, writes } = recordingSocket();
  const beforeWrite = coalescedWrites(socket);
  const send = (frame: string) => {
    beforeWrite();
    socket.write(frame);
  };
  send("job 1");
  assert.deepEqual(writes, [["job 1"]]);
  send("job 2");
  await Promise.resolve();
  send("job 3");
  assert.deepEqual(writes, [["job 1"]], "later frames of the turn wait");
  await nextTurn();
  assert.deepEqual(writes, [["job 1"], ["job 2", "job 3"]]);

  send("job 4");
  assert.deepEqual(writes.at(-1), ["job 4"], "a new turn's first frame leaves at once again");
  send("job 5");
  await nextTurn();
  assert.deepEqual(writes.at(-1), ["job 5"]);
  await nextTurn();
  assert.equal(writes.length, 4, "nothing is left held once the turns end");
});

test("while the connection is busy, the turn's first frame waits with the rest", async () => {
  const { socket, writes } = recordingSocket();
  let jobsUnderWay = 2;
  const beforeWrite = coalescedWrites(socket, () => jobsUnderWay > 1);
  const send = (frame: string) => {
    beforeWrite();
    socket.write(frame);
  };
  send("delta 1");
  send("delta 2");
  assert.deepEqual(writes, [], "nothing leaves before the turn ends");
  await nextTurn();
  assert.deepEqual(writes, [["delta 1", "delta 2"]], "the turn's frames leave in one write");

  jobsUnderWay = 1;
  send("done");
  assert.deepEqual(writes.at(-1), ["done"], "a lone job's frame leaves at once");
  await nextTurn();
  assert.equal(writes.length, 2, "nothing is left held");
});

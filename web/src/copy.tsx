/** Text to copy (a command, a code snippet): shown as code, with a Copy button that says when it copied. */
import { useRef, useState } from "preact/hooks";

/** Copies with the Clipboard API; where the page may not use it (plain http off loopback), selects the text and copies that. */
async function copyText(text: string, block: HTMLElement | null): Promise<void> {
  if (navigator.clipboard) return navigator.clipboard.writeText(text);
  if (!block) throw new Error("nothing to copy");
  const range = document.createRange();
  range.selectNodeContents(block);
  const selection = window.getSelection();
  selection?.removeAllRanges();
  selection?.addRange(range);
  if (!document.execCommand("copy")) throw new Error("copy refused");
}

export function CopyBlock({ label, text }: { label: string; text: string }) {
  const [said, setSaid] = useState("");
  const block = useRef<HTMLPreElement>(null);
  const copy = () => copyText(text, block.current).then(() => setSaid("Copied."), () => setSaid("The browser refused to copy: select the text instead."));
  return (
    <figure class="copy-block">
      <figcaption>
        {label}
        <button type="button" aria-label={`Copy ${label}`} onClick={copy}>
          Copy
        </button>
        <span class="copy-said" aria-live="polite">{said}</span>
      </figcaption>
      {/* Focusable so that a keyboard can scroll a long line. */}
      <pre ref={block} tabIndex={0} aria-label={label}>
        <code>{text}</code>
      </pre>
    </figure>
  );
}

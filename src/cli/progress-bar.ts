/** A one-line progress bar on stderr for model downloads. */
let lineOpen = false;

export function progressBar(): (downloadedBytes: number, totalBytes: number) => void {
  let last = -1;
  return (downloadedBytes, totalBytes) => {
    const percent = totalBytes > 0 ? Math.floor((downloadedBytes / totalBytes) * 100) : 0;
    if (percent === last) return;
    last = percent;
    const width = 30;
    const filled = Math.round((percent / 100) * width);
    const mb = (n: number) => (n / 1_048_576).toFixed(1);
    process.stderr.write(`\rDownloading model [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${percent}% ${mb(downloadedBytes)}/${mb(totalBytes)} MB`);
    lineOpen = percent < 100;
    if (!lineOpen) process.stderr.write("\n");
  };
}

/** Ends a bar a failed download left open, so the error that follows gets a line of its own. */
export function endProgressLine(): void {
  if (lineOpen) process.stderr.write("\n");
  lineOpen = false;
}

/** A one-line progress bar on stderr for model downloads. */
export function progressBar(): (downloaded: number, total: number) => void {
  let last = -1;
  return (downloaded, total) => {
    const percent = total > 0 ? Math.floor((downloaded / total) * 100) : 0;
    if (percent === last) return;
    last = percent;
    const width = 30;
    const filled = Math.round((percent / 100) * width);
    const mb = (n: number) => (n / 1_048_576).toFixed(1);
    process.stderr.write(`\rDownloading model [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${percent}% ${mb(downloaded)}/${mb(total)} MB`);
    if (percent >= 100) process.stderr.write("\n");
  };
}

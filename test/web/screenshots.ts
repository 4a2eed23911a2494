/**
 * The screenshots of docs/app.md, written by the browser tests when SVC_WEB_SCREENSHOTS=1: each
 * page as it stands at a desktop width (`<name>.png`) and at a phone's (`<name>-phone.png`).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";

export const SCREENSHOTS = process.env.SVC_WEB_SCREENSHOTS === "1" ? join(import.meta.dirname, "..", "..", "docs", "app") : undefined;
export const DESKTOP = { width: 1280, height: 800 };
/** An iPhone 12 to 15's width in CSS pixels. */
export const PHONE = { width: 390, height: 844 };

/** Both widths of the page as it is now; the viewport is put back afterwards. Nothing without SVC_WEB_SCREENSHOTS=1. */
export async function shootBoth(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  const viewport = page.viewportSize();
  for (const [size, file] of [[DESKTOP, `${name}.png`], [PHONE, `${name}-phone.png`]] as const) {
    await page.setViewportSize(size);
    // A resize re-lays the page out: let it settle before the picture.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    await page.screenshot({ path: join(SCREENSHOTS, file), fullPage: true });
  }
  if (viewport) await page.setViewportSize(viewport);
}

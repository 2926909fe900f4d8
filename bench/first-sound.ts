import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * The listen page's time to first sound in headless Chromium: from the click on Play to the audio element's
 * currentTime moving, each run in a new browser profile (nothing cached). Milliseconds, one per run.
 */
export async function timesToFirstSound(listenPage: string, runs: number): Promise<number[]> {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const profile = await mkdtemp(join(tmpdir(), 'bench-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: CHROMIUM_ARGS,
    });
    try {
      const page = await context.newPage();
      await page.goto(listenPage);
      const clicked = performance.now();
      await page.click('#play');
      await page.waitForFunction(() => document.querySelector<HTMLAudioElement>('#player')!.currentTime > 0, null, {
        timeout: 60_000,
        polling: 20,
      });
      times.push(performance.now() - clicked);
    } finally {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    }
  }
  return times;
}

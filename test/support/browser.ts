import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium, headless, as the listen page tests drive it. */
export const CHROMIUM = '/usr/bin/chromium';

/** Chromium's switches for a test: no sandbox, GPU or background traffic, and sound that plays unprompted. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
}

import { UAParser } from 'ua-parser-js';

export interface Device {
  /** mobile, tablet, desktop, smarttv, console, wearable, embedded, or other (players, apps, bots: no browser). */
  device_class: string;
  /** The operating system the user agent names (iOS, Android, Windows, macOS, Linux…), else unknown. */
  platform: string;
}

/** A user agent's device class and platform, by ua-parser-js 1.x (MIT; the 2.x line is AGPL). */
export function deviceOf(userAgent: string): Device {
  const { device, os, browser } = new UAParser(userAgent.slice(0, 400)).getResult();
  const deviceClass = device.type ?? (browser.name ? 'desktop' : 'other');
  return { device_class: deviceClass, platform: os.name ?? 'unknown' };
}

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { stationIcons } from './station-icon.js';

export interface ListenAsset {
  body: Buffer;
  type: string;
}

/** The page's own script and hls.js (from node_modules: nothing is built or fetched), read once. */
export const LISTEN_ASSETS: Record<string, ListenAsset> = {
  'player.js': {
    body: readFileSync(new URL('./assets/player.js', import.meta.url)),
    type: 'text/javascript; charset=utf-8',
  },
  'hls.light.min.js': {
    body: readFileSync(createRequire(import.meta.url).resolve('hls.js/dist/hls.light.min.js')),
    type: 'text/javascript; charset=utf-8',
  },
};

/** A file under /listen/assets: the scripts, the favicon (PNG and .ico) and the artwork of stations without their own. */
export function listenAsset(name: string): ListenAsset | undefined {
  if (Object.hasOwn(LISTEN_ASSETS, name)) return LISTEN_ASSETS[name];
  if (name === 'favicon.png') return { body: stationIcons().favicon, type: 'image/png' };
  if (name === 'favicon.ico') return { body: stationIcons().ico, type: 'image/x-icon' };
  if (name === 'station.png') return { body: stationIcons().artwork, type: 'image/png' };
  return undefined;
}

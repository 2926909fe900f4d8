import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { PublicListenView } from './listen-view.js';

/** The page's own script and hls.js (from node_modules: nothing is built or fetched), read once. */
export const LISTEN_ASSETS: Record<string, { body: Buffer; type: string }> = {
  'player.js': {
    body: readFileSync(new URL('./assets/player.js', import.meta.url)),
    type: 'text/javascript; charset=utf-8',
  },
  'hls.light.min.js': {
    body: readFileSync(createRequire(import.meta.url).resolve('hls.js/dist/hls.light.min.js')),
    type: 'text/javascript; charset=utf-8',
  },
};

/** The size an embed is meant to take (the oEmbed answer and the documented snippet). */
export const EMBED_SIZE = { width: 400, height: 160 };

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** JSON inside a <script> element: no "</script>" or "<!--" can end it early. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

/**
 * The content security policy of the pages: scripts only from this service, the stream from anywhere (Icecast is on
 * another port or host), hls.js's workers and media as blobs; `frame-ancestors *` lets any site embed the player.
 */
export function pagePolicy(embeddable: boolean): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'unsafe-inline'",
    "img-src 'self' data:",
    'media-src * blob:',
    'connect-src *',
    'worker-src blob:',
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${embeddable ? '*' : "'self'"}`,
  ].join('; ');
}

const STYLE = `
  body { font-family: system-ui, sans-serif; margin: 0; padding: 1.5rem; background: #111; color: #eee; }
  main { max-width: 36rem; margin: 0 auto; }
  h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
  .now { font-size: 1.2rem; margin: 1rem 0 .25rem; }
  .artist, .facts { color: #aaa; }
  .facts span + span::before { content: " · "; }
  button { font-size: 1rem; padding: .5rem 1.5rem; margin: 1rem 0; border-radius: .3rem; border: 0;
    background: #3b82f6; color: #fff; cursor: pointer; }
  audio { width: 100%; }
  ol { color: #aaa; padding-left: 1.25rem; }
  body.embed { padding: .5rem; }
  body.embed h1 { font-size: 1rem; }
  body.embed .now { font-size: 1rem; margin: .25rem 0; }
  body.embed button { margin: .25rem 0; padding: .25rem 1rem; }
`;

/** The listen page (or its minimal embeddable variant): readable without script, played by player.js. */
export function listenPageHtml(
  view: PublicListenView,
  options: { embed: boolean; assetsUrl: string; oembedUrl: string },
): string {
  const track = view.now_playing;
  const name = escapeHtml(view.station_name);
  const history = options.embed
    ? ''
    : `<h2>Recently played</h2><ol id="history">${view.history
        .slice(1)
        .map((t) => `<li>${escapeHtml([t.artist, t.title].filter(Boolean).join(' – '))}</li>`)
        .join('')}</ol>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${name}</title>
<link rel="alternate" type="application/json+oembed" href="${escapeHtml(options.oembedUrl)}" title="${name}">
<style>${STYLE}</style>
<script type="application/json" id="initial-state">${scriptJson(view)}</script>
</head>
<body class="${options.embed ? 'embed' : 'page'}" data-state="${escapeHtml(view.now_playing_public)}"
  data-hls-script="${escapeHtml(`${options.assetsUrl}/hls.light.min.js`)}">
<main>
<h1 id="station">${name}</h1>
<div class="now">Now playing: <strong id="title">${escapeHtml(track?.title ?? 'Nothing announced yet')}</strong></div>
<div class="artist" id="artist">${escapeHtml(track?.artist ?? '')}</div>
<button id="play" type="button">Play</button>
<audio id="player" preload="none" controls></audio>
<div class="facts"><span id="on-air">${view.on_air ? 'On air' : 'Waiting for the broadcast to start'}</span><span
  id="listeners">${view.listeners.current} listener${view.listeners.current === 1 ? '' : 's'}</span><span
  id="time-left"></span></div>
${history}
</main>
<script src="${escapeHtml(`${options.assetsUrl}/player.js`)}"></script>
</body></html>
`;
}

/** A clear page for a stream that cannot be played here (unknown, ended, paused): never a stack trace. */
export function unavailablePageHtml(title: string, message: string, embed: boolean): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body class="${embed ? 'embed' : 'page'}"><main><h1>${escapeHtml(title)}</h1>
<p id="reason">${escapeHtml(message)}</p></main></body></html>
`;
}

/** The iframe a site pastes to embed the player (the oEmbed `html`, and docs/api.md's snippet). */
export function embedSnippet(view: Pick<PublicListenView, 'listen_embed' | 'station_name'>): string {
  return (
    `<iframe src="${escapeHtml(view.listen_embed)}" width="${EMBED_SIZE.width}" height="${EMBED_SIZE.height}" ` +
    `title="${escapeHtml(view.station_name)}" allow="autoplay" style="border:0"></iframe>`
  );
}

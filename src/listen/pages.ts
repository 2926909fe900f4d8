import { type Archive, archiveHtml } from './archive.js';
import { escapeHtml, scriptJson } from './html.js';
import type { PublicListenView, PublicTrack } from './listen-view.js';
import { artworkOf, previewTags } from './page-head.js';
import { PAGE_STYLE } from './page-style.js';

/**
 * The size the embed takes (the oEmbed answer and the documented snippet): 8 px padding around a bar of 88 px (the
 * name and the title, 20 px each, and a 44 px control row beside 72 px of artwork); without script the browser's
 * audio bar takes the button's 44 px. The Chromium test measures it inside an iframe on a page of another origin.
 */
export const EMBED_SIZE = { width: 400, height: 104 };

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

export interface PageOptions {
  embed: boolean;
  assetsUrl: string;
  oembedUrl: string;
  /** Past shows of the station (the page lists them; the embed does not). */
  archive?: Archive;
}

const trackLine = (t: PublicTrack) => [t.artist, t.title].filter(Boolean).join(' – ');
const listenersText = (n: number) => `${n} listener${n === 1 ? '' : 's'}`;

/**
 * The listen page (or its embeddable bar): without script it is an audio element with the Icecast stream and its
 * native controls; player.js replaces those with the one Play button, plays HLS where offered and keeps it current.
 */
export function listenPageHtml(view: PublicListenView, options: PageOptions): string {
  const name = escapeHtml(view.station_name);
  const head = options.embed ? '' : previewTags(view, options.assetsUrl);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${name}</title>
<link rel="icon" type="image/png" sizes="32x32" href="${escapeHtml(`${options.assetsUrl}/favicon.png`)}">
<link rel="alternate" type="application/json+oembed" href="${escapeHtml(options.oembedUrl)}" title="${name}">
${head}
<style>${PAGE_STYLE}</style>
<script type="application/json" id="initial-state">${scriptJson(view)}</script>
</head>
<body class="${options.embed ? 'embed' : 'page'}" data-state="${escapeHtml(view.now_playing_public)}"
  data-hls-script="${escapeHtml(`${options.assetsUrl}/hls.light.min.js`)}">
${options.embed ? embedBody(view, options) : pageBody(view, options)}
<script src="${escapeHtml(`${options.assetsUrl}/player.js`)}"></script>
</body></html>
`;
}

/**
 * The playing track's cover picture when it has one, else the station's artwork (player.js switches them as tracks
 * change; data-fallback is the service's own icon, for a station without artwork).
 */
function artImg(view: PublicListenView, options: PageOptions, side: number): string {
  const src = view.now_playing?.artwork_url ?? artworkOf(view, options.assetsUrl).url;
  const fallback = `${options.assetsUrl}/station.png`;
  // Decorative beside the station's name and the title (its alt would repeat them to a screen reader).
  return `<img class="art" id="art" src="${escapeHtml(src)}" data-fallback="${escapeHtml(fallback)}" alt="" width="${side}" height="${side}">`;
}

function nowPlaying(view: PublicListenView, label: boolean): string {
  const track = view.now_playing;
  return `<p class="now" aria-live="polite">${label ? '<span class="label">Now playing: </span>' : ''}<strong id="title">${escapeHtml(track?.title ?? 'Nothing announced yet')}</strong>
<span id="artist">${escapeHtml(track?.artist ?? '')}</span></p>`;
}

function controls(view: PublicListenView, facts: string): string {
  return `<div class="controls"><button id="play" type="button" hidden>Play</button>
<audio id="player" preload="none" controls src="${escapeHtml(view.stream_url)}" aria-label="${escapeHtml(`Listen to ${view.station_name}`)}"></audio>
${facts}</div>`;
}

function pageBody(view: PublicListenView, options: PageOptions): string {
  const description = view.description ? `<p id="description">${escapeHtml(view.description)}</p>` : '';
  const recent = view.history.slice(1);
  const facts = `<p class="facts"><span id="on-air">${view.on_air ? 'On air' : 'Waiting for the broadcast to start'}</span><span
  id="listeners">${listenersText(view.listeners.current)}</span><span id="time-left"${view.show_time_left ? '' : ' hidden'}></span></p>`;
  return `<main>
<header class="station">${artImg(view, options, 128)}<div><h1 id="station">${escapeHtml(view.station_name)}</h1>
${description}</div></header>
<section class="player" aria-label="Player">
${nowPlaying(view, true)}
${controls(view, facts)}
</section>
<section id="recent" aria-labelledby="recent-heading"${recent.length ? '' : ' hidden'}><h2 id="recent-heading">Recently played</h2>
<ol id="history">${recent.map((t) => `<li>${escapeHtml(trackLine(t))}</li>`).join('')}</ol></section>
${archiveHtml(options.archive)}
</main>`;
}

function embedBody(view: PublicListenView, options: PageOptions): string {
  const facts = `<span class="facts" id="listeners">${listenersText(view.listeners.current)}</span>`;
  return `<main>${artImg(view, options, 72)}<div class="info">
<h1 id="station">${escapeHtml(view.station_name)}</h1>
${nowPlaying(view, false)}
${controls(view, facts)}
</div></main>`;
}

/** A clear page for a stream that cannot be played here (unknown, ended, paused): never a stack trace. */
export function unavailablePageHtml(title: string, message: string, embed: boolean): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head>
<body class="${embed ? 'embed' : 'page'}"><main><div><h1>${escapeHtml(title)}</h1>
<p id="reason">${escapeHtml(message)}</p></div></main></body></html>
`;
}

/** The iframe a site pastes to embed the player (the oEmbed `html`, and docs/stations.md's snippet). */
export function embedSnippet(
  view: Pick<PublicListenView, 'listen_embed' | 'station_name'>,
  width: number = EMBED_SIZE.width,
): string {
  return (
    `<iframe src="${escapeHtml(view.listen_embed)}" width="${width}" height="${EMBED_SIZE.height}" ` +
    `title="${escapeHtml(view.station_name)}" allow="autoplay" style="border:0"></iframe>`
  );
}

import { escapeHtml } from './html.js';
import type { PublicListenView } from './listen-view.js';

/** The artwork a page and its link preview show: the owner's, else the service's own icon. */
export function artworkOf(view: PublicListenView, assetsUrl: string): { url: string; size?: number } {
  return view.artwork_url ? { url: view.artwork_url } : { url: `${assetsUrl}/station.png`, size: 256 };
}

export const summaryOf = (view: PublicListenView) => view.description || `Listen live to ${view.station_name}.`;

/**
 * Open Graph and Twitter card tags: a shared link previews with the station's name, description and artwork.
 * Twitter reads og: tags where its own are missing, but not for the card type and the image's alt text.
 */
export function previewTags(view: PublicListenView, assetsUrl: string): string {
  const art = artworkOf(view, assetsUrl);
  const tags: Array<[string, string, string]> = [
    ['name', 'description', summaryOf(view)],
    ['property', 'og:type', 'website'],
    ['property', 'og:site_name', 'Agent Audio'],
    ['property', 'og:title', view.station_name],
    ['property', 'og:description', summaryOf(view)],
    ['property', 'og:url', view.listen_page],
    ['property', 'og:image', art.url],
    ['property', 'og:image:alt', `${view.station_name} artwork`],
    ['property', 'og:audio', view.stream_url],
    ['property', 'og:audio:type', 'audio/mpeg'],
    ['name', 'twitter:card', 'summary'],
    ['name', 'twitter:title', view.station_name],
    ['name', 'twitter:description', summaryOf(view)],
    ['name', 'twitter:image', art.url],
    ['name', 'twitter:image:alt', `${view.station_name} artwork`],
  ];
  if (art.size)
    tags.push(['property', 'og:image:width', String(art.size)], ['property', 'og:image:height', String(art.size)]);
  return tags.map(([attr, key, value]) => `<meta ${attr}="${key}" content="${escapeHtml(value)}">`).join('\n');
}

import {
  listenAddresses,
  type NowPlaying,
  type PlayedTrack,
  type ServiceRecords,
  type ServiceRow,
} from '../services/index.js';
import { RecordingStore } from '../recordings/index.js';
import { type StationProfile, StationProfiles } from '../station-profile/index.js';
import type { Database } from '../store/index.js';

/** A track as the public sees it (no source of the change: that is the owner's business). */
export interface PublicTrack {
  title: string;
  artist: string | null;
  started_at: string;
  /** The cover picture the track's file carries (AutoDJ's uploads); null for live titles and files without one. */
  artwork_url: string | null;
}

/** The public JSON beside the listen page, and what the page shows. No credentials, no owner data. */
export interface PublicListenView {
  service_id: string;
  station_name: string;
  /** The owner's words about the station (profile, else the order's metadata.station_description). */
  description: string | null;
  /** The station's artwork (PUT /services/{id}/profile/artwork), served beside the page. */
  artwork_url: string | null;
  /** The owner shows the time left on the page (profile or the order's metadata.show_time_left); default not. */
  show_time_left: boolean;
  status: 'active';
  /** A source (live encoder, AutoDJ or relay) is connected. */
  on_air: boolean;
  stream_url: string;
  /** HLS playlist when the service has one; the page prefers it where the browser cannot play the MP3 well. */
  hls_url: string | null;
  now_playing: PublicTrack | null;
  history: PublicTrack[];
  listeners: { current: number };
  /** Null when the owner does not show the time left, or no end is set. */
  expires_at: string | null;
  remaining_seconds: number | null;
  listen_page: string;
  listen_embed: string;
  now_playing_public: string;
}

/** Why a service has no listen page now, and the HTTP status that says it. */
export type ListenLookup =
  | { kind: 'on_air'; view: PublicListenView }
  | { kind: 'unknown' }
  | { kind: 'ended'; status: 410; reason: string }
  | { kind: 'off_air'; status: 503; reason: string };

const SERVICE_ID = /^[a-zA-Z0-9_-]{8,120}$/;
const publicTrack =
  (page: string) =>
  (t: PlayedTrack): PublicTrack => ({
    title: t.title,
    artist: t.artist,
    started_at: t.started_at,
    artwork_url: t.artwork ? `${page}/track-artwork/${t.artwork}` : null,
  });

/** Reads a service for the public: its listen page's state, or why there is none. */
export class ListenPages {
  /** What owners say about their stations (the profile routes write it, the pages read it). */
  readonly profiles: StationProfiles;
  /** The station's recorded shows (the page lists the finished ones of a public feed). */
  readonly recordings: RecordingStore;

  constructor(
    private readonly db: Database,
    private readonly services: ServiceRecords,
    private readonly nowPlaying: NowPlaying,
    private readonly apiBaseUrl: () => string,
  ) {
    this.profiles = new StationProfiles(db);
    this.recordings = new RecordingStore(db);
  }

  async lookup(serviceId: string): Promise<ListenLookup> {
    const service = SERVICE_ID.test(serviceId) ? await this.services.byId(serviceId) : undefined;
    if (!service) return { kind: 'unknown' };
    const ended = (reason: string): ListenLookup => ({ kind: 'ended', status: 410, reason });
    const timeOver = service.expires_at !== null && service.expires_at.getTime() <= Date.now();
    if (service.stopped_at) return ended('This stream was stopped by its owner and has ended.');
    if (service.status === 'expired' || timeOver) return ended('This stream has ended: the time bought is over.');
    if (service.status === 'failed') return ended('This stream could not be set up and will not start.');
    const offAir = (reason: string): ListenLookup => ({ kind: 'off_air', status: 503, reason });
    if (service.status === 'suspended') return offAir('This stream is paused for now.');
    if (service.status !== 'active') return offAir('This stream is being set up; try again in a moment.');
    return { kind: 'on_air', view: await this.view(service) };
  }

  private async view(service: ServiceRow): Promise<PublicListenView> {
    const [facts, profile, history] = await Promise.all([
      this.orderFacts(service),
      this.profiles.get(service.id),
      this.nowPlaying.played(service.id),
    ]);
    const shown = profile.show_time_left ?? facts.show_time_left === 'true';
    const remaining = service.expires_at
      ? Math.max(0, Math.floor((service.expires_at.getTime() - Date.now()) / 1000))
      : null;
    const document = this.services.document(service);
    const addresses = listenAddresses(this.apiBaseUrl(), service.id);
    const tracks = history.map(publicTrack(addresses.listen_page));
    return {
      service_id: service.id,
      station_name: profile.name || facts.station_name || 'Live stream',
      ...describedBy(profile, facts.description, addresses.listen_page),
      show_time_left: shown,
      status: 'active',
      on_air: service.usage?.source_connected === true,
      stream_url: document.stream_url,
      hls_url: document.endpoints?.hls_url ?? null,
      now_playing: tracks[0] ?? null,
      history: tracks,
      listeners: { current: facts.listeners },
      expires_at: shown ? (service.expires_at?.toISOString() ?? null) : null,
      remaining_seconds: shown ? remaining : null,
      ...addresses,
    };
  }

  /** What a station says about itself, for any service (its podcast feed is read after a stream's time too). */
  async station(service: ServiceRow) {
    const [facts, profile] = await Promise.all([this.orderFacts(service), this.profiles.get(service.id)]);
    const addresses = listenAddresses(this.apiBaseUrl(), service.id);
    const name = profile.name || facts.station_name || 'Live stream';
    return { station_name: name, ...describedBy(profile, facts.description, addresses.listen_page), ...addresses };
  }

  private async orderFacts(service: ServiceRow) {
    const [facts] = await this.db.query<{
      station_name: string | null;
      description: string | null;
      show_time_left: string | null;
      listeners: number;
    }>(
      `SELECT o.request->>'station_name' AS station_name,
         o.request->'metadata'->>'station_description' AS description,
         o.request->'metadata'->>'show_time_left' AS show_time_left,
         (SELECT count(*)::int FROM listeners WHERE service_id = $1) AS listeners
       FROM (SELECT 1) AS one LEFT JOIN orders o ON o.id = $2`,
      [service.id, service.order_id],
    );
    return facts;
  }
}

function describedBy(profile: StationProfile, orderDescription: string | null, page: string) {
  return {
    description: (profile.description ?? orderDescription) || null,
    artwork_url: profile.artwork ? `${page}/artwork/${profile.artwork.name}` : null,
  };
}

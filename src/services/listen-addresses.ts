export interface ListenAddresses {
  listen_page: string;
  listen_embed: string;
  now_playing_public: string;
}

/** Where a service's public listen page lives, under the API's public address (PUBLIC_BASE_URL + /api/v1). */
export function listenAddresses(apiBaseUrl: string, serviceId: string): ListenAddresses {
  const page = `${apiBaseUrl}/listen/${serviceId}`;
  return { listen_page: page, listen_embed: `${page}/embed`, now_playing_public: `${page}/now-playing` };
}

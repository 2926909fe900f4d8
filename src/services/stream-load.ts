/** What one Icecast carries: one source per service, and every listener place its services were sold. */
export interface StreamLoad {
  sources: number;
  listeners: number;
}

import type { RequestListener } from 'node:http';
import Koa from 'koa';
import Router from '@koa/router';
import {
  handleIcecastCallback,
  hasBasicCredentials,
  icecastResponseHeaders,
  readCallbackForm,
  type MountDecider,
} from '../provisioning/index.js';

export const ICECAST_CALLBACK_PREFIX = '/internal';

/**
 * Icecast's URL-authentication callbacks; only Icecast knows the credentials. A failure answers 500, which Icecast
 * treats as a refusal.
 */
export function icecastCallbackRoutes(decider: MountDecider, credentials: { user: string; password: string }): Router {
  const router = new Router({ prefix: ICECAST_CALLBACK_PREFIX });
  router.post('/icecast/:action', async (ctx) => {
    if (!hasBasicCredentials(ctx.get('Authorization') || undefined, credentials)) {
      ctx.status = 401;
      ctx.body = 'unauthorized';
      return;
    }
    const decision = await handleIcecastCallback(ctx.params.action, await readCallbackForm(ctx.req), decider);
    ctx.set(icecastResponseHeaders(decision));
    ctx.body = '';
  });
  return router;
}

/**
 * A streaming host's own listener (serve --role host): only Icecast's callbacks, answered from PostgreSQL by the host
 * itself, so that its streams depend on no API instance. Anything else is 404.
 */
export function createCallbackListener(
  decider: MountDecider,
  credentials: { user: string; password: string },
): RequestListener {
  const app = new Koa({ proxy: false });
  app.silent = true;
  const routes = icecastCallbackRoutes(decider, credentials);
  app.use(routes.routes());
  app.use((ctx) => {
    ctx.status = 404;
    ctx.body = 'this is a streaming host: the API is served by the API instances';
  });
  return app.callback();
}

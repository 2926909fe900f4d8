import http from 'node:http';
import https from 'node:https';
import { checkedLookup, RefusedUrl } from '../ssrf/index.js';
import type { WebhookUrlPolicy } from './webhook-url-policy.js';

export interface PostOutcome {
  /** 2xx: delivered. Redirects are not followed and count as failures. */
  ok: boolean;
  status?: number;
  error?: string;
}

/** How much of a receiver's answer is read (for the delivery's last_error); the rest is dropped. */
const RESPONSE_BYTES = 1024;

/**
 * One delivery attempt: the URL checked against the policy before and at connect time (DNS rebinding), the whole
 * exchange bounded by `timeoutMs`, no redirect followed, at most 1 KiB of the answer read.
 */
export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  policy: WebhookUrlPolicy,
  timeoutMs: number,
): Promise<PostOutcome> {
  const refused = await policy.refuse(url);
  if (refused) return { ok: false, error: `refused: ${refused}` };
  const client = url.startsWith('https:') ? https : http;
  return new Promise<PostOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: PostOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(outcome);
    };
    const request = client.request(
      url,
      {
        method: 'POST',
        lookup: checkedLookup(policy),
        agent: false,
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'agent-audio-webhooks',
        },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let text = '';
        response.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
          if (text.length >= RESPONSE_BYTES) finish(outcomeOf(status, text));
        });
        response.on('end', () => finish(outcomeOf(status, text)));
        response.on('error', (e) => finish({ ok: false, status, error: e.message }));
      },
    );
    const timer = setTimeout(() => finish({ ok: false, error: `no answer within ${timeoutMs} ms` }), timeoutMs);
    request.on('error', (e) =>
      finish({ ok: false, error: e instanceof RefusedUrl ? `refused: ${e.message}` : e.message }),
    );
    request.end(body);
  });
}

function outcomeOf(status: number, text: string): PostOutcome {
  if (status >= 200 && status < 300) return { ok: true, status };
  const answer = text.slice(0, 200).replace(/\s+/g, ' ').trim();
  const reason = status >= 300 && status < 400 ? 'redirects are not followed' : `HTTP ${status}`;
  return { ok: false, status, error: answer ? `${reason}: ${answer}` : reason };
}

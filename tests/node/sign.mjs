// Signs a body (stdin) as a provider does, with the provider's own package:
//   node sign.mjs stripe <secret> [timestamp]   -> Stripe-Signature value
//   node sign.mjs github <secret>                -> X-Hub-Signature-256 value
import { readFileSync } from "node:fs";
import Stripe from "stripe";
import { sign } from "@octokit/webhooks-methods";

const [provider, secret, timestamp] = process.argv.slice(2);
const payload = readFileSync(0, "utf8");

if (provider === "stripe") {
  const stripe = new Stripe("sk_test_unused");
  const opts = { payload, secret };
  if (timestamp) opts.timestamp = Number(timestamp);
  process.stdout.write(stripe.webhooks.generateTestHeaderString(opts));
} else if (provider === "github") {
  process.stdout.write(await sign(secret, payload));
} else {
  console.error(`unknown provider ${provider}`);
  process.exit(2);
}

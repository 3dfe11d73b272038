// Drives Hookgate's Ingest API with the official Svix JavaScript SDK, as a user
// of it would: `node ingest.mjs <server url> <api key> <sink url> <sender secret>`.
// Creates a Clerk-type source (found again by uid, its token rotated once) and an
// ingest endpoint; prints what the Python test needs as one JSON line.
import { Svix } from "svix";

const [serverUrl, key, sinkUrl, senderSecret] = process.argv.slice(2);
const svix = new Svix(key, { serverUrl, retryScheduleInMs: [] });

const source = await svix.ingest.source.create({
  name: "Clerk (JS)",
  uid: "clerk-js",
  type: "clerk",
  config: { secret: senderSecret },
});
const byUid = await svix.ingest.source.get("clerk-js");
if (byUid.id !== source.id) throw new Error(`get by uid: ${byUid.id} != ${source.id}`);
const rotated = await svix.ingest.source.rotateToken(source.id);
const endpoint = await svix.ingest.endpoint.create(source.id, { url: sinkUrl, uid: "js-endpoint" });
const listed = await svix.ingest.endpoint.list(source.id);
const { key: secret } = await svix.ingest.endpoint.getSecret(source.id, endpoint.id);
console.log(
  JSON.stringify({
    sourceId: source.id,
    firstUrl: source.ingestUrl,
    ingestUrl: rotated.ingestUrl,
    endpointId: endpoint.id,
    listed: listed.data.map((e) => e.id),
    secret,
  }),
);

// Opening the MongoDB read store through the real driver, where no server is needed to tell:
// wrong URLs and system databases are refused with a clear message, and a server that does not
// answer fails the start quickly, naming where without the password.

import { describe, expect, it } from 'vitest';
import { openMongoReadStore } from '../../../infra/mongodb/readStore.ts';

describe('openMongoReadStore', () => {
  it('refuses a URL that is not a MongoDB connection string', async () => {
    await expect(openMongoReadStore('postgres://db/x')).rejects.toThrow(/MONGODB_URL is not a MongoDB connection string/);
  });

  it("refuses MongoDB's own databases", async () => {
    for (const db of ['admin', 'local', 'config']) {
      await expect(openMongoReadStore(`mongodb://127.0.0.1:1/${db}`)).rejects.toThrow(
        new RegExp(`names the database "${db}", which is MongoDB's own`),
      );
    }
  });

  it('fails fast when the server does not answer, without printing the password', async () => {
    const started = Date.now();
    const opening = openMongoReadStore('mongodb://reader:s3cret@127.0.0.1:1/models?serverSelectionTimeoutMS=300');
    await expect(opening).rejects.toThrow(
      /MongoDB at mongodb:\/\/reader:\*\*\*@127\.0\.0\.1:1\/models\?serverSelectionTimeoutMS=300 does not answer/,
    );
    await expect(opening).rejects.not.toThrow(/s3cret/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

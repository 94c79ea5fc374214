import { describe, expect, it } from 'vitest';
import { redactCredentials } from '../../infra/redact.ts';

describe('redactCredentials', () => {
  it('hides the password of KurrentDB and MongoDB connection strings, multi-host ones too', () => {
    expect(redactCredentials('kurrentdb://admin:changeit@db:2113?tls=true')).toBe('kurrentdb://admin:***@db:2113?tls=true');
    expect(redactCredentials('mongodb://reader:p%40ss@a:27017,b:27017/models?replicaSet=rs0')).toBe(
      'mongodb://reader:***@a:27017,b:27017/models?replicaSet=rs0',
    );
  });

  it('leaves a string without credentials as it is', () => {
    expect(redactCredentials('kurrentdb://db:2113?tls=false')).toBe('kurrentdb://db:2113?tls=false');
    expect(redactCredentials('mongodb://127.0.0.1:27017/admin-read-models')).toBe('mongodb://127.0.0.1:27017/admin-read-models');
  });
});

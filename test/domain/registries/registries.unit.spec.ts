// Resource-specific rules of SPEC.md that the shared contract suite does not reach.

import { describe, expect, it } from 'vitest';
import { notificationRule } from '../../../modules/registries/domain/notificationRule.ts';
import { notificationTemplate } from '../../../modules/registries/domain/notificationTemplate.ts';
import { userType } from '../../../modules/registries/domain/userType.ts';

const template = { code: 'T', name: 'T', configTypeId: '8d3c4a52-2f0e-4b8a-9a55-0d7e7b1f6c21' };
const issues = (schema: { safeParse: (x: unknown) => { error?: { issues: { path: PropertyKey[] }[] } } }, input: unknown) =>
  (schema.safeParse(input).error?.issues ?? []).map((i) => i.path.join('.'));

describe('notification template', () => {
  it.each(['from', 'to', 'icon', 'subject'])('limits %s to 255 characters', (field) => {
    expect(issues(notificationTemplate.fields, { ...template, [field]: 'x'.repeat(255) })).toEqual([]);
    expect(issues(notificationTemplate.fields, { ...template, [field]: 'x'.repeat(256) })).toEqual([field]);
  });

  it('needs configTypeId, takes expiration as a non-negative int32 and the listed enumerations', () => {
    expect(issues(notificationTemplate.fields, { code: 'T', name: 'T' })).toEqual(['configTypeId']);
    expect(issues(notificationTemplate.fields, { ...template, expiration: 2 ** 31 })).toEqual(['expiration']);
    expect(issues(notificationTemplate.fields, { ...template, expiration: -1 })).toEqual(['expiration']);
    expect(issues(notificationTemplate.fields, { ...template, expiration: 1.5 })).toEqual(['expiration']);
    expect(issues(notificationTemplate.fields, { ...template, deliveryType: 'PIGEON', status: 'ACTIVE' })).toEqual(['deliveryType']);
  });
});

describe('notification rule', () => {
  it.each([
    ['https://tickets.example/api/data', true],
    ['/api/v1/tickets/data', true],
    ['//evil.example/x', false],
    ['ftp://files.example/x', false],
    ['javascript:alert(1)', false],
  ])('evalNotificationUrl %s valid: %s', (url, valid) => {
    expect(issues(notificationRule.fields, { code: 'R', name: 'R', evalNotificationUrl: url })).toEqual(
      valid ? [] : ['evalNotificationUrl'],
    );
  });
});

describe('user type', () => {
  it('takes only the user kinds of the registry', () => {
    expect(issues(userType.fields, { code: 'U', name: 'U', type: 'EXTERNAL' })).toEqual([]);
    expect(issues(userType.fields, { code: 'U', name: 'U', type: 'ROBOT' })).toEqual(['type']);
  });

  it('keeps localizationData to language codes with name and description', () => {
    expect(
      issues(userType.fields, { code: 'U', name: 'U', type: 'INDIVIDUAL', localizationData: { cs: { name: 'Jednotlivec' } } }),
    ).toEqual([]);
    expect(issues(userType.fields, { code: 'U', name: 'U', type: 'INDIVIDUAL', localizationData: { 'not a language': {} } })).toEqual([
      'localizationData.not a language',
    ]);
    expect(issues(userType.fields, { code: 'U', name: 'U', type: 'INDIVIDUAL', localizationData: { en: { title: 'x' } } })).toEqual([
      'localizationData.en',
    ]);
  });
});

// Sharing: records shared with users and groups.
export { sharingModule } from './api/sharing.ts';

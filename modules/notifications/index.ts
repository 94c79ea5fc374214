// Notifications: notifications and their delivery (e-mail, SMS, in-app) by the dispatcher,
// triggers (REST and the Kafka trigger topic) that rules turn into notifications, and the
// outbound events topic. Notification rules and templates are registries (modules/registries/).

import { composeModule } from '../../api/module.ts';
import { notificationRecordsModule } from './api/notifications.ts';
import { notificationTriggersModule } from './api/triggers.ts';

export const notificationsModule = composeModule('notifications', [notificationRecordsModule, notificationTriggersModule]);
